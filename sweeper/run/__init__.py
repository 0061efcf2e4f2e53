"""Running a sweep: Ray (in `ray_tune` and its searcher `search` only), one trial's fresh processes,
sweep state, progress."""
