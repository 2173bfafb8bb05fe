"""The team home page: what is happening now, from the selectors of the apps that own the data."""
