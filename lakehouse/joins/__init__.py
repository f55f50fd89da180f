"""Stream joins: click-stream events with the shop's changing tables (as of event time)."""
