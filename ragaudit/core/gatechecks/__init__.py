"""The gate's checks: what a check is (`entry`) and every check, one entry each (`registry`)."""
