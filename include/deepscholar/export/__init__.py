"""The published data as plain files (`deepscholar export`): tables.py declares the files, writer.py writes
them, datacard.py their README.md."""

from deepscholar.export.writer import ExportResult, export_release

__all__ = ["ExportResult", "export_release"]
