"""Publishing an article once, verified: the publishers, URL checks, the editor's review, registration numbers, and
settling what an earlier run left on the platforms.
"""
