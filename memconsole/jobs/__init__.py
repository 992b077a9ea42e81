"""Background jobs, the worker side (docs/operations.md "Jobs", docs/design.md §1): django-tasks'
database backend runs `tasks.run_job`, which runs a `memory.jobs.Job` through `runner.execute`.
Faces start jobs with `runner.submit`; the domain (`memory/jobs.py`, `memory/jobkinds.py`) knows
nothing of django-tasks."""
