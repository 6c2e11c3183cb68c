"""report.html: a run folder as one self-contained page (verdict, anomalies
with their graphs, checkers, a timeline of ops, latency, throughput and
conflict plots, the run's spec). Written by the check pipeline beside
results.json; opens offline."""

from harness.check.report.render import REPORT_NAME, render_report, store_replaced_text, write_report

__all__ = ["REPORT_NAME", "render_report", "store_replaced_text", "write_report"]
