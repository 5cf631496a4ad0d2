"""Message-passing layers, one a file: `gat` (GATConv), `gt` (GTConv), `gcn` (GCNLayer), and
`base`, what they share. Users import the layers from `lipnorm.nn`."""
