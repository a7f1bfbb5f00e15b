"""State changes of the evaluation app (endpoints, prompts, runs) and the job engine.
Views, commands and Celery tasks call these, nothing else."""
