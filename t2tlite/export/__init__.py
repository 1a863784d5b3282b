"""Exporting trained models as SavedModels for TF Serving, and querying them.

    from t2tlite.export.exporter import export_saved_model
    path = export_saved_model("~/t2t_train/ende")   # -> .../export/<version>
"""
