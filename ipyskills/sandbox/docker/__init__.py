"""The Docker backend: one hardened container per run (backend), the engine connection (client), the image
and its profiles (image, images/), the warm pool (pool), and the in-container launcher (launcher)."""
