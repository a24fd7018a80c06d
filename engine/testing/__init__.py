"""Testing aids that tavernbox exports for its users: Hypothesis strategies for fuzzing."""
