"""Climate control: settings, the loop's decisions and the loop that carries them out."""
