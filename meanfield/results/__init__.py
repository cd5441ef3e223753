"""What a run gives back: the `Solution` (saving, loading, continuing), its pictures and its movies.

Floor: above everything of the model layer except the experiments and the command line
(docs/architecture.md, "The floor plan").
"""
