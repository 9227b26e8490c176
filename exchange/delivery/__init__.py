"""The worker's delivery machinery that is not the cycle itself: the bound on requests in
flight (``gate``) and the site's probe turn among several workers (``probe``). Each is given
its monotonic clock, so that tests drive it with a fake one."""
