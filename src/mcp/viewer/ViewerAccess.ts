/**
 * Which sessions a viewer may see: a viewer belongs to the bearer token that minted its
 * link, a session to the token that created it, and a viewer sees exactly its token's
 * sessions. With one token every viewer and every session share the one identity, so
 * everyone holding it sees every session.
 */

/** The identity of a bearer token (never the token itself). */
export type TokenIdentity = string

/** The identity of the door's one token, when it has one. */
export const SOLE_TOKEN: TokenIdentity = "token"

/** Whether a viewer of `viewer`'s token may see a session `owner`'s token created. */
export const mayView = (viewer: TokenIdentity, owner: TokenIdentity): boolean => viewer === owner
