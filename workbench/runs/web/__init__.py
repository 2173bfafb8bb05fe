"""The runs pages: views, their forms (the config form from the RunConfig schema, YAML in and out), JSON
endpoints, compare, the inspector's token shading, the home page's reads and the polls' conditional GETs."""
