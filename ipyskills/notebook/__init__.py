"""The notebook layer: magics, rich display, traitlets config and the widget browser.

Loaded by `%load_ext ipyskills`; nothing here is imported by `import ipyskills`.
"""
