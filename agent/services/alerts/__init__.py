"""Threshold alerts: rules, and the evaluator that raises and clears alerts over readings."""
