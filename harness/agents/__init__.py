"""Agent strategies: one file each; conf/agent/<name>.yaml names the class (the Hydra group is the registry)."""
