"""t2t-serve: a page and JSON API over an export or a run folder
(model_source: what is served; validation: request checks; app: the Flask
app; static/: the page)."""
