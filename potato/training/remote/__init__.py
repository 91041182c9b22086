"""One module per remote backend type (ssh, slurm, agent) and the shell-out helpers they share."""
