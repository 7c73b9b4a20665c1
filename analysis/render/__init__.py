"""Rendering: the HTML and Markdown pages from the Jinja templates (pages) and the matplotlib charts
(charts). May import: analysis.compare_report and every layer below it.
"""
