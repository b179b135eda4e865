"""What a run leaves behind: the run directory's outputs (`writing`), their renderers (`render`),
rendered citations (`citations`) and a finished run read back as tables (`results`)."""
