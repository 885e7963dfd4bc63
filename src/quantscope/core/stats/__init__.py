"""Exact statistics: what a report holds, the direct pass, the prepared (sorted) path that
reports in microseconds, the clip sweep, format reports and the one-read model scan.
"""
