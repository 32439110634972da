"""A worker's metrics: the Prometheus series its processes write, the gauges read at each scrape, and how long
a change took to be searchable."""
