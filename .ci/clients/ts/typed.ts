// Compiles only against a client whose problem codes are typed and whose optional headers are
// optional: rides.d.ts is generated from api/openapi.yaml by the check beside it.
import createClient from "openapi-fetch";
import type { components, paths } from "./rides";

type Booked = paths["/rides"]["post"]["responses"][201];

// An answer that was not replayed has no Idempotent-Replayed: the header must be optional.
export const fresh: Booked["headers"] = {
  "X-Request-Id": "req_5JRVNSK7BQ2TQEDXJ3KUHGWZ4M",
  "Cache-Control": "no-store",
  "X-Content-Type-Options": "nosniff",
};

export async function book(baseUrl: string, token: string, key: string): Promise<string> {
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const { data, error, response } = await client.POST("/rides", {
    params: { header: { "Idempotency-Key": key } },
    body: { origin_lat: 37.7749, origin_lon: -122.4194, target_lat: 37.3382, target_lon: -121.8863 },
  });
  if (error) {
    const code: components["schemas"]["ProblemCode"] = error.code;
    switch (code) {
      case "card_declined":
      case "payment_rejected":
        return `refused: ${error.detail}`;
      default:
        return `error ${response.status}: ${code}`;
    }
  }
  const status: components["schemas"]["Ride"]["status"] = "declined";
  return `${data.ride.id} ${response.headers.get("Idempotent-Replayed") ?? "fresh"} ${status}`;
}
