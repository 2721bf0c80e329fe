"""Spark pipelines on Yak topics, each runnable with ``spark-submit pipelines/<name>.py``."""
