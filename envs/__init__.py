"""Gymnasium environments for graphopt's placement, scheduling, fusion and joint tasks."""
