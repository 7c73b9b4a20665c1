"""Analysis: DuckDB SQL over the collector's Parquet, then Jinja reports. Never imports torch."""
