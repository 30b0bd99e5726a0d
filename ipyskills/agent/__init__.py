"""Agent-facing layers of ipyskills: the tools served to agent clients."""
