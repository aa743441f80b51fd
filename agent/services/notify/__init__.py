"""Notifications to people: contact points, rules, the history, acknowledgement (the sending
loop is integrations/notify/'s deliverer over agent/store/notify.py)."""
