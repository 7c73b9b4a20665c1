"""The analysis commands beside the report: the regression gate, the index of published reports,
screen-and-confirm, calibration. May import every other analysis layer; nothing imports it but
analysis.__main__ (and index's ROOT, the project folder).
"""
