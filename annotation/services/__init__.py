"""State changes of the annotation app. Views, commands, tasks and APIs call these, nothing else.

One module per area: ``imports`` (datasets in), ``projects`` (projects, guidelines, members,
assignments) and ``queue`` (claiming, saving, submitting and skipping annotations).
"""
