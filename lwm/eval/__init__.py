"""Evaluation: fidelity metrics, LLM judge, the benchmark runner and its reports."""
