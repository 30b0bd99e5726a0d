"""The Docker backend: one hardened container per run (backend), creating and starting it (containers),
reading its output (stream), removing it on every path (cleanup), the warm pool (pool), the engine
connection (client), the runtime and its setup (runtime, gvisor_setup), the image and its profiles (image,
profile_images, images/), and the in-container launcher (launcher)."""
