"""Plots: Gantt charts of simulated schedules."""
