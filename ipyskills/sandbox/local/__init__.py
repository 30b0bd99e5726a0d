"""The local backend: a confined subprocess on this machine when no engine is available (backend), its
confinement plan (confine), the helper that applies it in the child (isolation), and the skill copy a run
works on (skill_copy)."""
