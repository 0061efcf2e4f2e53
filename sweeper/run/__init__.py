"""Running a sweep: Ray (in `ray_tune` only), one trial's fresh processes, sweep state, progress."""
