"""The reviews app's state changes: adjudication (decide, reopen, auto-accept, review states)."""
