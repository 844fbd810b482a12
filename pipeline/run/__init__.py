"""One run, start to finish: the runner, the agent loop, the guard, the run's events and its up-front validation.
"""
