"""What a run's worker streams back: the database sink, the ingest services, chart series and their rollups,
echo-trap alerts over the stored series."""
