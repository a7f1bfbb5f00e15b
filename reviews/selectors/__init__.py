"""Reads the reviews app's views, commands and exports share."""
