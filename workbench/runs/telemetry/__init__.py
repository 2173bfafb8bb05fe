"""What a run's worker streams back, stored: the ingest services, chart series and their rollups, echo-trap
alerts over the stored series."""
