"""Use cases of the agent: authorization, validation across rows, and calls into stores."""
