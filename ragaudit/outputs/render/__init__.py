"""The renderers: each output of a run (report.html, summary.md, junit.xml, traces.log and
rag_traces.sqlite, compare, faults, audit-log and calibration views) from the typed report or the
result it shows. Nothing here audits, reads a history or moves a file: `ragaudit.outputs.writing` does.
"""
