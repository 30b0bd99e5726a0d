"""The local backend: a confined subprocess on this machine when no engine is available (backend), its
confinement plan (confine), the helper that applies it in the child (isolation), the skill copy a run
works on (skill_copy), the run's own uid and what it left (run_uids), and the run's files (run_files)."""
