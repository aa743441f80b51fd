"""Notifications to people: contact points, rules, the history, acknowledgement (the sending
loop is protocol/notify/'s deliverer over agent/store/notify.py)."""
