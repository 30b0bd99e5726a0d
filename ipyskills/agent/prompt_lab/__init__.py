"""Prompt lab: measure what a model does with your skills.

- `trigger_eval.eval_trigger(skills, name, queries, client=, model=)`: does a skill's description make the
  model load it for the requests it should, and leave it alone for the others? (also `reg.eval_trigger`)
- `budget.skill_budget(registry, name=None)`: what each skill costs in characters and tokens at levels 1,
  2 and 3, against the specification's guidance.

No SDK and no IPython is imported here; the notebook layer (`%skills eval`, `%skills budget`,
`%%skill_agent`) only renders these results.
"""
