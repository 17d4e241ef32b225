"""``http://shop.test/``: a small shop with a catalogue, search, cart, checkout and orders."""

from __future__ import annotations

from dataclasses import dataclass, field

from lwm.domains.web.sites import Form, Response, Site, esc, first, redirect

#: id -> (name, price in cents, category, description)
PRODUCTS: dict[int, tuple[str, int, str, str]] = {
    1: ("Blue Mug", 1250, "Kitchen", "A 350 ml stoneware mug, dishwasher safe."),
    2: ("Green Tea (100 g)", 899, "Groceries", "Loose-leaf sencha from Shizuoka."),
    3: ("Notebook A5", 450, "Office", "Dotted paper, 120 pages."),
    4: ("Desk Lamp", 3999, "Office", "LED lamp with three brightness levels."),
    5: ("Café Crème Beans (1 kg)", 1899, "Groceries", "Medium roast coffee beans."),
}
SHIPPING = {"standard": ("Standard (3-5 days)", 0), "express": ("Express (1 day)", 999)}


def money(cents: int) -> str:
    """``1250`` -> ``$12.50``."""
    return f"${cents // 100}.{cents % 100:02d}"


@dataclass
class ShopSite(Site):
    """The shop's state: the cart ``{product id: quantity}`` and the placed orders."""

    host: str = "shop.test"
    name: str = "Shop"
    nav: tuple[tuple[str, str], ...] = (("/", "Products"), ("/cart", "Cart"), ("/orders", "Orders"))
    cart: dict[int, int] = field(default_factory=dict)
    orders: list[dict] = field(default_factory=list)

    def handle(self, method: str, path: str, query: Form, form: Form) -> Response:
        parts = [p for p in path.split("/") if p]
        if method == "POST":
            if path == "/cart/add":
                return self._add(form)
            if path == "/cart/update":
                return self._update(form)
            if path == "/checkout":
                return self._checkout(form)
        elif not parts:
            return self._catalogue("Products", list(PRODUCTS))
        elif parts == ["search"]:
            q = first(query, "q")
            hits = [i for i, p in PRODUCTS.items() if q and q.lower() in p[0].lower()]
            return self._catalogue(f"Search results for “{q}”", hits, q)
        elif len(parts) == 2 and parts[0] == "product" and parts[1].isdigit() and int(parts[1]) in PRODUCTS:
            return self._product(int(parts[1]))
        elif parts == ["cart"]:
            return self._cart()
        elif parts == ["checkout"]:
            return self._checkout_form()
        elif parts == ["orders"]:
            return self._orders()
        elif len(parts) == 2 and parts[0] == "orders" and parts[1].isdigit() and 0 < int(parts[1]) <= len(self.orders):
            return self._order(int(parts[1]))
        return self.not_found(path)

    # -- pages --------------------------------------------------------------------------
    def _catalogue(self, title: str, ids: list[int], q: str = "") -> Response:
        search = (f'<form role="search" action="/search" method="get"><label>Search products '
                  f'<input type="search" name="q" value="{esc(q)}"></label>'
                  '<button type="submit">Search</button></form>')
        if not ids:
            return self.page(title, search + "<p>No products found.</p>")
        items = "".join(f'<li><a href="/product/{i}">{esc(PRODUCTS[i][0])}</a> {money(PRODUCTS[i][1])}</li>'
                        for i in ids)
        return self.page(title, f"{search}<ul>{items}</ul>")

    def _product(self, pid: int) -> Response:
        name, price, category, desc = PRODUCTS[pid]
        opts = "".join(f'<option value="{n}">{n}</option>' for n in range(1, 6))
        body = (f"<p>{esc(desc)}</p><p>Category: {esc(category)}</p><p>Price: {money(price)}</p>"
                f'<form action="/cart/add" method="post"><input type="hidden" name="product" value="{pid}">'
                f'<label>Quantity <select name="quantity">{opts}</select></label>'
                f'<button type="submit">Add to cart</button></form>')
        return self.page(name, body)

    def _cart_table(self) -> str:
        rows = "".join(f"<tr><td>{esc(PRODUCTS[p][0])}</td><td>{q}</td><td>{money(PRODUCTS[p][1] * q)}</td></tr>"
                       for p, q in self.cart.items())
        return (f"<table><caption>Cart items</caption><tr><th>Product</th><th>Quantity</th><th>Subtotal</th></tr>"
                f"{rows}</table><p>Total: {money(self._total())}</p>")

    def _cart(self) -> Response:
        if not self.cart:
            return self.page("Your cart", '<p>Your cart is empty.</p><p><a href="/">Continue shopping</a></p>')
        forms = "".join(
            f'<form action="/cart/update" method="post"><input type="hidden" name="product" value="{p}">'
            f'<label>Quantity of {esc(PRODUCTS[p][0])} <input type="number" name="quantity" min="0" value="{q}">'
            f'</label><button type="submit">Update {esc(PRODUCTS[p][0])}</button></form>' for p, q in self.cart.items())
        return self.page("Your cart", f'{self._cart_table()}{forms}<p><a href="/checkout">Proceed to checkout</a></p>')

    def _checkout_form(self) -> Response:
        if not self.cart:
            return self.page("Checkout", '<p>Your cart is empty.</p><p><a href="/">Continue shopping</a></p>')
        ship = "".join(f'<option value="{k}">{esc(v[0])}</option>' for k, v in SHIPPING.items())
        body = (f'{self._cart_table()}<form action="/checkout" method="post">'
                f'<label>Full name <input type="text" name="name" required></label>'
                f'<label>Address <textarea name="address" required></textarea></label>'
                f'<label>Shipping <select name="shipping">{ship}</select></label>'
                f'<label><input type="checkbox" name="gift" value="yes"> Gift wrap</label>'
                f'<button type="submit">Place order</button></form>')
        return self.page("Checkout", body)

    def _orders(self) -> Response:
        if not self.orders:
            return self.page("Your orders", "<p>You have not placed any orders yet.</p>")
        items = "".join(f'<li><a href="/orders/{i}">Order #{i}</a> for {esc(o["name"])}: {money(o["total"])}'
                        f' ({o["status"]})</li>' for i, o in enumerate(self.orders, 1))
        return self.page("Your orders", f"<ul>{items}</ul>")

    def _order(self, n: int) -> Response:
        o = self.orders[n - 1]
        lines = "".join(f"<li>{q} × {esc(PRODUCTS[p][0])}</li>" for p, q in o["items"])
        body = (f"<p>Status: {o['status']}</p><p>Ship to: {esc(o['name'])}, {esc(o['address'])}</p>"
                f"<p>Shipping: {esc(SHIPPING[o['shipping']][0])}</p><p>Gift wrap: {'yes' if o['gift'] else 'no'}</p>"
                f"<ul>{lines}</ul><p>Total: {money(o['total'])}</p>")
        return self.page(f"Order #{n}", body)

    # -- actions --------------------------------------------------------------------------
    def _total(self, shipping: str = "standard") -> int:
        return sum(PRODUCTS[p][1] * q for p, q in self.cart.items()) + SHIPPING[shipping][1]

    def _add(self, form: Form) -> Response:
        pid, qty = first(form, "product"), first(form, "quantity", "1")
        if not (pid.isdigit() and int(pid) in PRODUCTS and qty.isdigit() and 0 < int(qty) <= 99):
            self.flash_error = "Could not add that item."
            return redirect("/cart")
        p = int(pid)
        self.cart[p] = min(99, self.cart.get(p, 0) + int(qty))
        self.flash = f"Added {qty} × {PRODUCTS[p][0]} to your cart."
        return redirect("/cart")

    def _update(self, form: Form) -> Response:
        pid, qty = first(form, "product"), first(form, "quantity")
        if not (pid.isdigit() and int(pid) in self.cart and qty.isdigit() and int(qty) <= 99):
            self.flash_error = "Quantity must be a whole number from 0 to 99."
            return redirect("/cart")
        if int(qty) == 0:
            del self.cart[int(pid)]
            self.flash = f"Removed {PRODUCTS[int(pid)][0]}."
        else:
            self.cart[int(pid)] = int(qty)
            self.flash = "Cart updated."
        return redirect("/cart")

    def _checkout(self, form: Form) -> Response:
        name, address, shipping = first(form, "name"), first(form, "address"), first(form, "shipping", "standard")
        if not self.cart:
            self.flash_error = "Your cart is empty."
            return redirect("/cart")
        if not name or not address or shipping not in SHIPPING:
            self.flash_error = "Please enter your name and address."
            return redirect("/checkout")
        self.orders.append({"name": name[:100], "address": address[:200], "shipping": shipping,
                            "gift": first(form, "gift") == "yes", "items": sorted(self.cart.items()),
                            "total": self._total(shipping), "status": "confirmed"})
        self.cart.clear()
        self.flash = "Thank you! Your order has been placed."
        return redirect(f"/orders/{len(self.orders)}")
