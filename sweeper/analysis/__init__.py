"""From rows to answers: typed frames, Pareto fronts, comparisons, the recommendation. No torch, no Ray."""
