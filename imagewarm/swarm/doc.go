// Package swarm fetches blobs into the agent's store from the nodes that
// hold them, and from upstream only through a tracker's lease: the data
// plane of the image swarm (docs: ../shared/reference/p2p-image-distribution.md
// §4.3).
//
// A Fetcher makes one blob present and verified in the store. All callers
// asking for the same digest share one fetch. In the default Swarm mode a
// fetch:
//
//   - looks the digest up at its trackers (imagewarm/tracker) every Poll,
//     learning who holds which pieces, the upstream lease and, once someone
//     verified the blob, its sha256 piece hashes;
//   - requests missing pieces from holders over HTTP Range on the OCI blob
//     endpoint (imagewarm/blobserver), from several holders, rarest piece
//     first with random tie-breaks, a few requests per holder and
//     MaxInflight per node over all fetches (each request more slows every
//     piece, and a piece serves others only once complete); a request that
//     receives nothing for PieceStall is given up;
//   - announces its own partial bitmap every AnnounceInterval, so the pieces
//     it received are re-served at once (cut-through);
//   - when no holder has a piece it needs, asks for the digest's upstream
//     lease; the one node that gets it streams the blob from the registry
//     in order, and everyone else swarms its pieces;
//   - duplicates the last pieces to a second holder (endgame) and hedges a
//     request that runs well past the usual piece time;
//   - checks each piece against published piece hashes when there are some,
//     and the whole blob's sha256 at the end (store.Blob.Commit). A peer
//     that sent a piece failing the hashes is blacklisted for BlacklistFor.
//     Pieces that arrived before the hashes were known and fail them are
//     dropped without blame (a node may have relayed them in good faith),
//     and so is a blob that fails its digest, after which the fetch takes
//     peers' pieces again only once the hashes can check them;
//   - publishes the piece hashes after its own verification, announces the
//     blob complete and gives the lease back.
//
// Two more modes exist for the benchmark's side-by-side baselines: Naive
// (every node streams every blob from upstream) and SpegelLike (only
// complete blobs are announced and fetched from peers; no leases; a node
// that finds no complete holder goes upstream itself).
//
// Every byte received, from peers and upstream alike, draws from one ingress
// token bucket when Config.Ingress is set.
package swarm
