"""Per-domain knowledge: system prompts, action formats, judge rubrics."""
